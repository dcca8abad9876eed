# A hookrelay webhook receiver in Ruby with the standard library (OpenSSL, WEBrick).
# Run: WEBHOOK_SECRET=whsec_… PORT=8000 ruby receiver.rb
require "base64"
require "json"
require "openssl"
require "set"
require "webrick"

KEY = Base64.strict_decode64(ENV.fetch("WEBHOOK_SECRET").delete_prefix("whsec_"))
TOLERANCE_S = 5 * 60
SEEN = Set.new # webhook-ids already handled; use a unique key in your database instead

def verify(raw, id, ts, sigs)
  return false unless id && sigs && ts&.match?(/\A\d+\z/)
  return false if (Time.now.to_i - ts.to_i).abs > TOLERANCE_S # too old (or too new): a replay
  expected = OpenSSL::HMAC.digest("SHA256", KEY, "#{id}.#{ts}." + raw) # the raw body bytes
  sigs.split(" ").any? do |s|
    version, b64 = s.split(",", 2)
    got = Base64.decode64(b64.to_s)
    version == "v1" && got.bytesize == expected.bytesize && OpenSSL.fixed_length_secure_compare(got, expected)
  end
end

server = WEBrick::HTTPServer.new(BindAddress: "127.0.0.1", Port: Integer(ENV.fetch("PORT")),
                                 Logger: WEBrick::Log.new(nil, 0), AccessLog: [])
server.mount_proc "/" do |req, res|
  raw = (req.body || "").b
  id = req["webhook-id"]
  if verify(raw, id, req["webhook-timestamp"], req["webhook-signature"])
    event = JSON.parse(raw) # parse only after verifying
    if SEEN.add?(id)
      puts "verified #{id} #{event["type"]}"
      $stdout.flush
    end
    res.status = 204
  else
    res.status = 400
  end
end
trap("TERM") { server.shutdown }
server.start
