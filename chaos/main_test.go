package chaos

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/postbox-go/postbox/internal/testenv"
)

// full selects the full sizes of every scenario (50,000 events under relay kills, and so on); the default sizes
// keep the whole suite within a few minutes on two cores.
var full = flag.Bool("chaos.full", os.Getenv("POSTBOX_CHAOS_FULL") == "1",
	"run every scenario at full size (also POSTBOX_CHAOS_FULL=1)")

// sharedDB is the database on the shared PostgreSQL server for the scenarios that do not restart PostgreSQL.
var sharedDB string

func TestMain(m *testing.M) {
	if isChild() {
		os.Exit(runChild())
	}
	flag.Parse()
	var err error
	if sharedDB, err = testenv.FreshPostgres("postbox_chaos"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// size returns the reduced or, with -chaos.full, the full value.
func size[T any](reduced, fullSize T) T {
	if *full {
		return fullSize
	}
	return reduced
}

// deadline bounds one scenario: if the system has not settled by then, the scenario fails and shows its logs.
func deadline() time.Duration { return size(3*time.Minute, 20*time.Minute) }
