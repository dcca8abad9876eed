package audit_test

import (
	"testing"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/audittest"
)

func TestMemoryConformance(t *testing.T) {
	audittest.Run(t, func(*testing.T) audit.Store { return audit.NewMemory() })
}
