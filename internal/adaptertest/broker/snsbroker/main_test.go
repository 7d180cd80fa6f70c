package snsbroker_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/postbox-go/postbox/internal/testenv"
	"go.uber.org/goleak"
)

// emulator is the fauxqs process (SNS and SQS) every test of the package uses, started by TestMain; startErr says
// why it is missing (the tests then fail under CI=true and skip otherwise).
var (
	emulator *testenv.Fauxqs
	startErr error
)

func TestMain(m *testing.M) {
	emulator, startErr = testenv.StartFauxqs()
	code := m.Run()
	if emulator != nil {
		emulator.Stop()
	}
	if code == 0 {
		// The SDK's HTTP clients keep idle connections to the emulator, each with its read and write loops.
		if err := goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

var creds = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test", Source: "test"}, nil
})

// clients returns SNS and SQS clients for endpoint.
func clients(endpoint string) (*sns.Client, *sqs.Client) {
	return sns.New(sns.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds}),
		sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds})
}

// server returns clients for the package's fauxqs, failing or skipping the test when it did not start.
func server(t *testing.T) (*sns.Client, *sqs.Client) {
	t.Helper()
	testenv.NeedFauxqs(t, startErr)
	return clients(emulator.Endpoint)
}
