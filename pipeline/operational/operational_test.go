package operational_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookrelay/hookrelay/pipeline/operational"
)

// An event is deterministic: the same transition gives the same id (and so
// the same webhook-id), whatever the time zone it was built in.
func ExampleNew() {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	ev, err := operational.New(operational.TypeEndpointFailing, "acme", since,
		operational.Data{EndpointID: "billing", FailingSince: &since, Reason: "http_500"})
	if err != nil {
		panic(err)
	}
	again, _ := operational.New(operational.TypeEndpointFailing, "acme", since.UTC(),
		operational.Data{EndpointID: "billing", FailingSince: &since, Reason: "http_500"})
	v, _ := ev.Value()
	var m map[string]any
	_ = json.Unmarshal(v, &m)
	fmt.Println(m["type"], m["tenantid"], m["subject"], m["source"], ev.ID == again.ID)
	fmt.Println(m["data"])
	_, err = operational.New("invoice.paid", "", since, operational.Data{EndpointID: "x"})
	fmt.Println(err)
	// Output:
	// hookrelay.endpoint.failing acme billing /hookrelay/endpoints/billing true
	// map[endpoint_id:billing failing_since:2026-01-02T02:04:05Z reason:http_500]
	// operational: type must start with hookrelay.
}
