package console

import "net/http"

func (c *Console) extraRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /topics/{db}/pause", c.change(c.topicAct(true)))
	m.HandleFunc("POST /topics/{db}/resume", c.change(c.topicAct(false)))
	m.HandleFunc("GET /replay", c.replay)
	m.HandleFunc("POST /replay", c.change(c.replayDo))
	m.HandleFunc("GET /inbox", c.inbox)
	m.HandleFunc("POST /inbox/{db}/retry", c.change(c.inboxRetry))
}
