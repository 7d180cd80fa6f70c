package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// loadAWSConfig loads the AWS configuration of an sqs:// or sns:// URL: the region is region (the URL's host),
// else AWS_REGION or AWS_DEFAULT_REGION, else the shared config's; credentials come from the SDK's default chain,
// with AWS_PROFILE and AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY read from the relay's environment; the endpoint
// is endpoint (the URL's parameter), else AWS_ENDPOINT_URL_<SERVICE>, else AWS_ENDPOINT_URL, else the service's
// own. It retrieves the credentials once, so that missing ones fail at start-up; perms names what they need.
func loadAWSConfig(ctx context.Context, region, endpoint, service, perms string, rt *runtime) (aws.Config, string, error) {
	region = firstOf(region, rt.env("AWS_REGION"), rt.env("AWS_DEFAULT_REGION"))
	var opts []func(*awsconfig.LoadOptions) error
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	if p := rt.env("AWS_PROFILE"); p != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(p))
	}
	if id, secret := rt.env("AWS_ACCESS_KEY_ID"), rt.env("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, rt.env("AWS_SESSION_TOKEN"))))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, "", fmt.Errorf("loading the AWS configuration: %v; check AWS_PROFILE and the shared config file", err)
	}
	if cfg.Region == "" {
		scheme := strings.ToLower(service)
		return aws.Config{}, "", fmt.Errorf("no AWS region: write %s://REGION (such as %s://eu-west-1), or set AWS_REGION", scheme, scheme)
	}
	endpoint = firstOf(endpoint, rt.env("AWS_ENDPOINT_URL_"+service), rt.env("AWS_ENDPOINT_URL"))
	if endpoint != "" {
		if e, err := url.Parse(endpoint); err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return aws.Config{}, "", fmt.Errorf("endpoint %q: write an http:// or https:// URL, such as https://%s.eu-west-1.amazonaws.com",
				endpoint, strings.ToLower(service))
		}
	}
	// The default chain finds no credentials only on the first call: find out now, in the user's words.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cfg.Credentials.Retrieve(cctx); err != nil {
		return aws.Config{}, "", errors.New("no AWS credentials (" + err.Error() + "): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with an IAM role that may " + perms)
	}
	return cfg, endpoint, nil
}

// firstOf returns the first non-empty string of vs.
func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
