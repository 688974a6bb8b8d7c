// Package fleet tests fleets of gateways as they run in production:
// separate Caddy processes, real redis-servers (or a Redis Cluster), and MCP
// servers on loopback. For rate limits shared on Redis, it checks what a
// client sees whichever node it reaches: one limit for the whole fleet,
// refills seen by every node, answers that stay prompt and follow on_error
// while Redis is down, buckets kept across reloads, and one round trip to
// Redis per decision. For sessions, it checks that a session opened through
// one node is used through another, with the same secret or with keys kept
// in a shared storage, and is gone (404) through a node with other keys.
package fleet
