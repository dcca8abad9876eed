package faults

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/e2e/stack"
)

// EnvSize selects the sizes: "full" for make faults, anything else (or
// unset) for the reduced sizes of make test.
const EnvSize = "HOOKRELAY_FAULTS"

// EnvReport, when set, names a file to which every scenario appends its
// result as one JSON line (docs/RELIABILITY.md's table is made from it).
const EnvReport = "HOOKRELAY_FAULTS_REPORT"

// sizes are the knobs of one run of the suite.
type sizes struct {
	Name        string
	Rate        int           // events per second of the load generator (each to 2 endpoints)
	Kills       int           // SIGKILLs of the kill -9 storm
	Settle      time.Duration // load before the first fault and after the last
	CHDown      time.Duration // ClickHouse outage
	NetFault    time.Duration // each network fault phase
	BrokerDown  time.Duration // how long a stopped broker stays down
	BrokerKill  bool          // also SIGKILL the broker (not only SIGTERM)
	BrokerNet   bool          // run the hookrelay<->broker network scenario
	ThreeNodes  bool          // run the 3-node cluster scenarios
	PeerRunTime time.Duration // load after the death of one of three instances
}

var (
	reduced = sizes{Name: "reduced", Rate: 40, Kills: 3, Settle: 5 * time.Second, CHDown: 15 * time.Second,
		NetFault: 10 * time.Second, BrokerDown: 5 * time.Second, PeerRunTime: 35 * time.Second}
	full = sizes{Name: "full", Rate: 200, Kills: 20, Settle: 15 * time.Second, CHDown: 60 * time.Second,
		NetFault: 45 * time.Second, BrokerDown: 15 * time.Second, BrokerKill: true, BrokerNet: true,
		ThreeNodes: true, PeerRunTime: 60 * time.Second}
)

// EnvRate and EnvKills, when set, override the rate (events/s) and the
// number of kills of the chosen sizes, e.g. for a full run on a busy machine.
const (
	EnvRate  = "HOOKRELAY_FAULTS_RATE"
	EnvKills = "HOOKRELAY_FAULTS_KILLS"
)

// EnvBrokerSignals, when set, is the broker signals TestBrokerFaults sends,
// comma-separated ("term", "kill"), e.g. "kill" to replay only the SIGKILL
// cases. Unset: SIGTERM, plus SIGKILL at full size.
const EnvBrokerSignals = "HOOKRELAY_FAULTS_BROKER_SIGNALS"

// size returns the sizes of this run.
func size() sizes {
	s := reduced
	if strings.EqualFold(os.Getenv(EnvSize), "full") {
		s = full
	}
	if n, err := strconv.Atoi(os.Getenv(EnvRate)); err == nil && n > 0 {
		s.Rate = n
		s.Name += fmt.Sprintf(" at %d/s", n)
	}
	if n, err := strconv.Atoi(os.Getenv(EnvKills)); err == nil && n > 0 {
		s.Kills = n
		s.Name += fmt.Sprintf(", %d kills", n)
	}
	return s
}

func TestMain(m *testing.M) {
	fmt.Fprintf(os.Stderr, "faults: %s sizes (%s=full for the full suite)\n", size().Name, EnvSize)
	code := stack.Main(m)
	stopPrivateKafka()
	removeBinary()
	os.Exit(code)
}
