package kinesisbroker

import (
	"strings"
	"testing"

	"github.com/aws/smithy-go"
	"github.com/postbox-go/postbox"
)

// TestThrottlingIsUnavailable: throttling and Kinesis's server errors count as the destination being down, not
// as the message failing; a missing stream or permission says what to fix. (kinesalite does not throttle, so the
// error values Kinesis answers with are built here.)
func TestThrottlingIsUnavailable(t *testing.T) {
	for _, code := range []string{"ProvisionedThroughputExceededException", "LimitExceededException", "KMSThrottlingException", "InternalFailure"} {
		if !throttled(code) {
			t.Errorf("a record failed with %s is not retried", code)
		}
		if err := classify(&smithy.GenericAPIError{Code: code}, "s"); !postbox.IsUnavailable(err) {
			t.Errorf("%s: %v is not marked unavailable", code, err)
		}
	}
	for _, c := range []struct{ code, want string }{{"ResourceNotFoundException", "create it"}, {"AccessDeniedException", "grant kinesis:PutRecords on stream s"}} {
		if err := classify(&smithy.GenericAPIError{Code: c.code}, "s"); postbox.IsUnavailable(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a message failure saying %q", c.code, err, c.want)
		}
	}
}
