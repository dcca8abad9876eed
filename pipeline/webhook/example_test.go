package webhook_test

import (
	"fmt"
	"time"

	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

func ExampleWebhookID() {
	fmt.Println(webhook.WebhookID("https://billing.example/api", "evt-42"))
	// Output: msg_xnyyebvvjjxfv3yfenxzqfnxri
}

func ExampleBody() {
	data := []byte(`{ "invoice": "in_1", "total": 4200 }`)
	body, _ := webhook.Body("invoice.paid", time.Date(2026, 5, 1, 12, 30, 0, 250e6, time.UTC), data)
	fmt.Println(string(body))
	// Output: {"type":"invoice.paid","timestamp":"2026-05-01T12:30:00.25Z","data":{"invoice":"in_1","total":4200}}
}

func ExampleSign() {
	secret, _ := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	sig := webhook.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`), secret)
	fmt.Println(sig)
	// Output: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}

func ExampleClassify() {
	c := webhook.Classify(webhook.Result{StatusCode: 429, RetryAfter: 5 * time.Second, HasRetryAfter: true})
	fmt.Println(c.Outcome, c.ErrorClass, c.PauseEndpoint, c.RetryAfter)
	c = webhook.Classify(webhook.Result{StatusCode: 302, Location: "https://new.example/hook"})
	fmt.Println(c.Outcome, c.ErrorClass)
	// Output:
	// retry_scheduled http_429 true 5s
	// failed redirect
}

func ExampleParseRetryAfter() {
	now := time.Date(2025, 11, 7, 8, 49, 37, 0, time.UTC)
	longest := 6 * time.Hour // the longest tier of the default schedule
	for _, v := range []string{"120", "Fri, 07 Nov 2025 09:49:37 GMT", "86400", "soon"} {
		d, ok := webhook.ParseRetryAfter(v, now)
		if !ok {
			d = webhook.DefaultPause // e.g. on a 429
		}
		fmt.Println(v, "->", min(d, longest))
	}
	// Output:
	// 120 -> 2m0s
	// Fri, 07 Nov 2025 09:49:37 GMT -> 1h0m0s
	// 86400 -> 6h0m0s
	// soon -> 1m0s
}
