package console

import (
	"fmt"
	"net/http"

	"github.com/postbox-go/postbox"
)

// deadFilter turns the page's query into the library's filter.
func deadFilter(q deadQuery) (postbox.DeadFilter, error) {
	if q.Type != "" || q.Key != "" || q.Error != "" || q.From != "" || q.To != "" {
		return postbox.DeadFilter{}, fmt.Errorf("%w: only the topic filter is available", errBadInput)
	}
	if q.Topic == "" {
		return postbox.DeadFilter{All: true}, nil
	}
	return postbox.DeadFilter{Topic: q.Topic}, nil
}

// countDead counts the dead messages f selects, for the confirmation page.
func countDead(r *http.Request, src Source, f postbox.DeadFilter) (int64, bool, error) {
	recs, err := src.ListDead(r.Context(), f)
	return int64(len(recs)), false, err
}
