module github.com/postbox-go/postbox/jsonschema

go 1.25.0

require (
	github.com/dlclark/regexp2 v1.11.5
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.2
)

require golang.org/x/text v0.14.0
