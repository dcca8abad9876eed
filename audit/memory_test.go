package audit_test

import (
	"testing"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/audittest"
)

func TestMemoryConformance(t *testing.T) {
	audittest.Run(t, func(*testing.T) audit.Store { return audit.NewMemory() })
}

func TestMemoryStats(t *testing.T) {
	audittest.RunStats(t, func(*testing.T) audittest.StatsStore { return audit.NewMemory() })
}
