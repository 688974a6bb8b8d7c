// Package envelope renders and parses the <tool_error> envelope: the wire
// contract of the MCP Fusion framework, through which the gateway tells a
// language model what went wrong, what to do about it, and when to retry.
//
// The bytes follow the reference implementation exactly: lines joined by a
// single "\n", no XML declaration, no trailing newline, two spaces before each
// <action> and <detail> line and no other indentation. Element text escapes
// only & and < (so > and quotes stay readable for the model); attribute values
// escape all five XML entities. Every optional part is written only when it
// carries something:
//
//	<tool_error code="RATE_LIMITED" severity="error">
//	<message>Rate limit exceeded: 10 calls per 1s for this client</message>
//	<recovery>Wait 3 seconds, then retry the same call.</recovery>
//	<details>
//	  <detail key="limit">per_client</detail>
//	</details>
//	<retry_after>3 seconds</retry_after>
//	</tool_error>
//
// An Envelope travels in one of three wire forms (see AppendToolResult and
// AppendRPCError): a tools/call result, a JSON-RPC error that echoes the
// request id, or an id-less JSON-RPC error sent with an HTTP error status.
//
// The package knows nothing of HTTP or Caddy; it is safe for concurrent use,
// since an Envelope is a plain value.
package envelope
