<?php
// A hookrelay webhook receiver in PHP with hash_hmac. Run it under any web
// server; to try it: WEBHOOK_SECRET=whsec_… php -S 127.0.0.1:8000 receiver.php
const TOLERANCE_S = 5 * 60;

function verify(string $raw, string $secret): bool {
    $id = $_SERVER['HTTP_WEBHOOK_ID'] ?? '';
    $ts = $_SERVER['HTTP_WEBHOOK_TIMESTAMP'] ?? '';
    $sigs = $_SERVER['HTTP_WEBHOOK_SIGNATURE'] ?? '';
    if ($id === '' || $sigs === '' || !ctype_digit($ts)) return false;
    if (abs(time() - (int)$ts) > TOLERANCE_S) return false; // too old (or too new): a replay
    $key = base64_decode(preg_replace('/^whsec_/', '', $secret), true);
    $expected = base64_encode(hash_hmac('sha256', "$id.$ts.$raw", $key, true)); // the raw body bytes
    foreach (explode(' ', $sigs) as $sig) {
        [$version, $b64] = array_pad(explode(',', $sig, 2), 2, '');
        if ($version === 'v1' && hash_equals($expected, $b64)) return true;
    }
    return false;
}

$raw = file_get_contents('php://input'); // the raw bytes, never json_encode(json_decode(...))
if (!verify($raw, getenv('WEBHOOK_SECRET'))) {
    http_response_code(400);
    return;
}
$event = json_decode($raw, true, 512, JSON_BIGINT_AS_STRING); // parse only after verifying
// Deduplicate on webhook-id. Each PHP request is its own process, so the
// "seen" set must live outside it: here an exclusive file create (atomic);
// in production, a unique key in your database.
$id = $_SERVER['HTTP_WEBHOOK_ID'];
$seen = getenv('SEEN_DIR') ?: sys_get_temp_dir() . '/webhooks-seen';
@mkdir($seen, 0700, true);
if (preg_match('/^[A-Za-z0-9_-]{1,128}$/', $id) && ($f = @fopen("$seen/$id", 'x')) !== false) {
    fclose($f);
    file_put_contents('php://stdout', "verified $id {$event['type']}\n"); // hand the event to a queue here
}
http_response_code(204);
