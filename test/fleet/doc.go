// Package fleet tests a fleet of gateways sharing their rate limits on
// Redis, as it runs in production: separate Caddy processes, a real
// redis-server (or Redis Cluster), and an MCP server on loopback. It checks
// what a client sees whichever node it reaches: one limit for the whole
// fleet, refills seen by every node, answers that stay prompt and follow
// on_error while Redis is down, buckets kept across reloads, and one round
// trip to Redis per decision.
package fleet
