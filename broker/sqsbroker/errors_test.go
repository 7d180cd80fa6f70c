package sqsbroker

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/postbox-go/postbox"
)

// TestThrottlingIsUnavailable: throttling and SQS's server errors count as the destination being down, not as
// the message failing; errors the user fixes in AWS say what to fix. (No emulator throttles, so the error
// values SQS answers with are built here.)
func TestThrottlingIsUnavailable(t *testing.T) {
	for _, code := range []string{"ThrottlingException", "RequestThrottled", "KmsThrottled", "ServiceUnavailable", "InternalError"} {
		err := classify(&smithy.GenericAPIError{Code: code, Message: "slow down"}, "sqs:SendMessage", "q")
		if !postbox.IsUnavailable(err) || postbox.IsPermanent(err) {
			t.Errorf("%s: %v is not marked unavailable", code, err)
		}
		entry := entryError("id", "q", types.BatchResultErrorEntry{Id: aws.String("0"), Code: aws.String(code), SenderFault: false})
		if !postbox.IsUnavailable(entry) {
			t.Errorf("%s in a batch entry: %v is not marked unavailable", code, entry)
		}
	}
	for _, c := range []struct{ code, want string }{
		{"AWS.SimpleQueueService.NonExistentQueue", "create it"},
		{"AccessDenied", "grant sqs:SendMessage on q"},
		{"InvalidClientTokenId", "AWS_ACCESS_KEY_ID"},
	} {
		err := classify(&smithy.GenericAPIError{Code: c.code}, "sqs:SendMessage", "q")
		if postbox.IsUnavailable(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a message failure saying %q", c.code, err, c.want)
		}
	}
	if !fatal(classify(&smithy.GenericAPIError{Code: "AccessDenied"}, "sqs:ReceiveMessage", "q")) {
		t.Error("a receive refused for a missing permission is retried; want Receive to return it")
	}
	refused := entryError("id", "q", types.BatchResultErrorEntry{Id: aws.String("0"), Code: aws.String("InvalidParameterValue"), SenderFault: true})
	if !postbox.IsPermanent(refused) || errors.Is(refused, errNoQueue) {
		t.Errorf("an entry refused as the sender's fault: %v; want it permanent", refused)
	}
}
