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
