package gateway

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// registerMetrics creates the gateway's gauge on Config.Meter:
// fathom.gateway.connections, by kind websocket or event_stream (Prometheus
// fathom_gateway_connections{kind}): open WebSockets and HTTP event streams (the event
// stream of a session and GET /v1/restarts?follow=1).
func (h *Handler) registerMetrics() error {
	if h.cfg.Meter == nil {
		return nil
	}
	g, err := h.cfg.Meter.Int64ObservableGauge("fathom.gateway.connections",
		metric.WithDescription("Open gateway connections: WebSockets and HTTP event streams."), metric.WithUnit("{connection}"))
	if err != nil {
		return fmt.Errorf("gateway metrics: %w", err)
	}
	ws := metric.WithAttributes(attribute.String("kind", "websocket"))
	streams := metric.WithAttributes(attribute.String("kind", "event_stream"))
	reg, err := h.cfg.Meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		h.mu.Lock()
		nws, nstreams := len(h.conns), h.streams
		h.mu.Unlock()
		o.ObserveInt64(g, int64(nws), ws)
		o.ObserveInt64(g, int64(nstreams), streams)
		return nil
	}, g)
	if err != nil {
		return fmt.Errorf("gateway metrics: %w", err)
	}
	h.metricsReg = reg
	return nil
}
