module github.com/postbox-go/postbox

go 1.25.0
