package sqsbroker

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/smithy-go"
	"github.com/postbox-go/postbox"
)

// Sentinels classify wraps, for Receive to tell what retrying cannot fix.
var (
	errNoQueue   = errors.New("the queue does not exist")
	errForbidden = errors.New("the credentials lack a permission")
)

// throttled reports whether an SQS error code says the request was throttled or SQS could not serve it: an
// outage, not the message's fault.
func throttled(code string) bool {
	switch code {
	case "ThrottlingException", "Throttling", "RequestThrottled", "RequestThrottledException", "TooManyRequestsException",
		"ServiceUnavailable", "ServiceUnavailableException", "InternalError", "InternalFailure", "InternalServerError",
		"KmsThrottled", "KMS.ThrottlingException", "KmsUnavailable", "RequestTimeout", "RequestTimeoutException":
		return true
	}
	return false
}

// classify wraps an error of a whole SQS call: throttling and server errors are marked postbox.Unavailable (an
// outage: the relay holds the destination's messages and probes it), and errors a user fixes in AWS (a missing
// queue, a missing permission, refused credentials) say what to do. perm is the IAM action the call needs and
// what the resource it was called on.
func classify(err error, perm, what string) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		switch {
		case throttled(code):
			return postbox.Unavailable(err)
		case code == "AWS.SimpleQueueService.NonExistentQueue" || code == "QueueDoesNotExist":
			return fmt.Errorf("%w: %s is not in this account and region; create it (Postbox never creates queues), or check the region and QueuePrefix/QueueSuffix: %w", errNoQueue, what, err)
		case code == "AccessDenied" || code == "AccessDeniedException" || strings.HasPrefix(code, "KMS.AccessDenied") || code == "KmsAccessDenied":
			return fmt.Errorf("%w: grant %s on %s (and kms:GenerateDataKey and kms:Decrypt on the key of an encrypted queue): %w", errForbidden, perm, what, err)
		case code == "InvalidClientTokenId" || code == "UnrecognizedClientException" || code == "SignatureDoesNotMatch" ||
			code == "ExpiredToken" || code == "InvalidSecurity" || code == "MissingAuthenticationToken":
			return fmt.Errorf("AWS refused the credentials (%s); check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the role the default credential chain picks: %w", code, err)
		}
	}
	var he interface{ HTTPStatusCode() int }
	if errors.As(err, &he) && he.HTTPStatusCode() >= 500 {
		return postbox.Unavailable(err)
	}
	if strings.Contains(err.Error(), "failed to retrieve credentials") || strings.Contains(err.Error(), "no EC2 IMDS role found") {
		return fmt.Errorf("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with an IAM role (the SDK's default credential chain): %w", err)
	}
	return err
}
