package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// apiClient calls hookrelay's management API as one key.
type apiClient struct {
	base string // http://host:port
	key  string
}

// endpointRequest is the body of POST /v1/endpoints (schema
// EndpointCreate) the demo sends.
type endpointRequest struct {
	ID          string   `json:"id"`
	URL         string   `json:"url"`
	Secret      string   `json:"secret"`
	EventTypes  []string `json:"event_types"`
	RatePerSec  float64  `json:"rate_per_sec"`
	MaxInFlight int      `json:"max_in_flight"`
}

// endpointRequestOf is the create request of ep, served by the receiver at
// receiverURL with secret.
func endpointRequestOf(ep demoEndpoint, receiverURL, secret string) endpointRequest {
	return endpointRequest{ID: ep.ID, URL: receiverURL + "/" + ep.ID, Secret: secret, EventTypes: ep.Events,
		RatePerSec: float64(ep.Rate), MaxInFlight: ep.MaxInFlight}
}

// createEndpoint registers ep, served by r, with POST /v1/endpoints. The
// API answers once the endpoints view of the process has the endpoint, so
// fan-out matches events published after it.
func (c *apiClient) createEndpoint(ctx context.Context, ep demoEndpoint, r *receiver) error {
	body, err := json.Marshal(endpointRequestOf(ep, r.url, r.secret))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/endpoints", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "demo-endpoint-"+ep.ID)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s/v1/endpoints (%s): %w", c.base, ep.ID, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST %s/v1/endpoints (%s): %s: %s", c.base, ep.ID, res.Status, strings.ReplaceAll(string(b), r.secret, "whsec_…"))
	}
	return nil
}
