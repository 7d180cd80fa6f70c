package watermillbridge_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/postbox-go/postbox/internal/testenv"
)

// dbURL is this package's own PostgreSQL database.
var dbURL string

func TestMain(m *testing.M) {
	var err error
	if dbURL, err = testenv.FreshPostgres("postbox_test_watermill"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}
