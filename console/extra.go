package console

import "net/http"

func (c *Console) extraRoutes(m *http.ServeMux) {}
