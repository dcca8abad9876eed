package main

import "testing"

// TestMemorySharesAddUpToTheBudget: the shares a process uses add up to at
// most its budget, whatever roles it runs; the audit sink's batch gets a
// thirty-second next to the dispatcher and what the stages not run leave.
func TestMemorySharesAddUpToTheBudget(t *testing.T) {
	const budget = 192 << 20
	all := map[string]bool{"fanout": true, "dispatch": true, "retry": true, "audit": true, "api": true}
	m := newMemoryShares(budget, all)
	used := m.DispatchHeld + m.DispatchFetch + m.DispatchProduce + 3*m.StageFetch + m.AttemptsProduce + m.AuditBatch
	if used > budget || m.AuditBatch != budget/32 {
		t.Errorf("every role: shares use %d of %d, audit batch %d (want %d)", used, budget, m.AuditBatch, budget/32)
	}
	sink := newMemoryShares(budget, map[string]bool{"audit": true})
	if used := sink.StageFetch + sink.AuditBatch; used != budget {
		t.Errorf("audit only: fetch and batch use %d of %d, want all of it", used, budget)
	}
	if sink.AuditBatch < 150<<20 {
		t.Errorf("audit only: batch share %d, want the unused stages' shares too", sink.AuditBatch)
	}
	ingest := newMemoryShares(budget, map[string]bool{"fanout": true, "dispatch": true, "retry": true, "audit": true})
	if ingest.AuditBatch != m.AuditBatch {
		t.Errorf("with dispatch, the batch share is %d, want %d", ingest.AuditBatch, m.AuditBatch)
	}
}
