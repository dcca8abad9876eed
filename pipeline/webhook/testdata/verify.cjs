// Verifies one webhook with the npm "standardwebhooks" package, the
// JavaScript reference implementation of Standard Webhooks.
// Input on stdin: {"secret": "whsec_...", "headers": {...}, "body": "..."}.
// Prints "ok" and exits 0 when the signature verifies, exits 1 otherwise.
// Run by TestSignNodeVerifier when node can resolve the package (NODE_PATH).
const { Webhook } = require("standardwebhooks");

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const { secret, headers, body } = JSON.parse(input);
  try {
    new Webhook(secret).verify(body, headers);
    console.log("ok");
  } catch (err) {
    console.log("invalid: " + err.message);
    process.exit(1);
  }
});
