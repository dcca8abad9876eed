package audit_test

import (
	"os"
	"time"

	"github.com/hookrelay/hookrelay/audit"
)

func ExampleWriteLog() {
	at := time.Date(2025, 3, 1, 12, 0, 0, 123e6, time.UTC)
	audit.WriteLog(os.Stdout, []audit.Attempt{
		{EventID: "evt-1", EventType: "invoice.paid", AttemptNumber: 2, AttemptedAt: at.Add(31 * time.Second),
			HTTPStatus: 200, Outcome: audit.Delivered, LatencyMs: 87},
		{EventID: "evt-1", EventType: "invoice.paid", AttemptNumber: 1, AttemptedAt: at,
			HTTPStatus: 503, Outcome: audit.RetryScheduled, LatencyMs: 1204, ErrorClass: "http_503", ErrorMessage: "upstream\tbusy"},
		{EventID: "evt-0", EventType: "customer.created", AttemptNumber: 1, AttemptedAt: at.Add(-time.Minute),
			Outcome: audit.RetryScheduled, LatencyMs: 10000, ErrorClass: "timeout"},
	})
	// Output:
	// TIME                      EVENT ID  TYPE              ATTEMPT  STATUS  OUTCOME          LATENCY MS  ERROR
	// 2025-03-01T12:00:31.123Z  evt-1     invoice.paid      2        200     delivered        87          -
	// 2025-03-01T12:00:00.123Z  evt-1     invoice.paid      1        503     retry_scheduled  1204        http_503: upstream busy
	// 2025-03-01T11:59:00.123Z  evt-0     customer.created  1        -       retry_scheduled  10000       timeout
}
