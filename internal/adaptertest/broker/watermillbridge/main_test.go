package watermillbridge_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/postbox-go/postbox/internal/testenv"
)

// dbURL is this package's own PostgreSQL database.
var dbURL string

func TestMain(m *testing.M) {
	dbURL = testenv.OrExit(testenv.FreshPostgres("postbox_test_watermill"))
	goleak.VerifyTestMain(m)
}
