package snsbroker

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/smithy-go"
	"github.com/postbox-go/postbox"
)

// TestThrottlingIsUnavailable: throttling and SNS's server errors count as the destination being down, not as
// the message failing; a missing topic or permission says what to fix. (No emulator throttles, so the error
// values SNS answers with are built here.)
func TestThrottlingIsUnavailable(t *testing.T) {
	for _, code := range []string{"Throttled", "KMSThrottling", "InternalError"} {
		if err := classify(&smithy.GenericAPIError{Code: code}, "arn"); !postbox.IsUnavailable(err) {
			t.Errorf("%s: %v is not marked unavailable", code, err)
		}
		if err := entryError("id", "arn", types.BatchResultErrorEntry{Id: aws.String("0"), Code: aws.String(code)}); !postbox.IsUnavailable(err) {
			t.Errorf("%s in a batch entry: %v is not marked unavailable", code, err)
		}
	}
	for _, c := range []struct{ code, want string }{{"NotFound", "create it"}, {"AuthorizationError", "grant sns:Publish on arn"}} {
		if err := classify(&smithy.GenericAPIError{Code: c.code}, "arn"); postbox.IsUnavailable(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a message failure saying %q", c.code, err, c.want)
		}
	}
	if err := entryError("id", "arn", types.BatchResultErrorEntry{Id: aws.String("0"), Code: aws.String("InvalidParameter"), SenderFault: true}); !postbox.IsPermanent(err) {
		t.Errorf("an entry refused as the sender's fault: %v; want it permanent", err)
	}
}
