package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// sessionSecret is the secret the sessions configuration seals its tokens
// with: fixed, so that every run seals alike; for the benchmark only.
const sessionSecret = "caddy-mcp-benchmark-session-secret-not-for-production"

// sessionProtocolVersion is the MCP-Protocol-Version every request of a
// session declares: the latest revision of the session era.
const sessionProtocolVersion = "2025-11-25"

// initializeBody opens a session.
const initializeBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + sessionProtocolVersion + `","capabilities":{},"clientInfo":{"name":"caddy-mcp-bench","version":"1"}}}`

// openSession opens a session through the gateway at addr, as a client of
// the 2025 revisions does, and returns the token the gateway sealed for it
// (sealed), or the responder's own id passed through (not sealed).
// An initialize without Mcp-Session-Id must be
// answered with a token that is not the responder's own id (sealed, not
// passed through); a tools/call naming the token must reach the responder
// with its own id (it answers any other with 404) and be answered with
// the token again.
func openSession(addr string, sealed bool) (string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	post := func(body []byte, hdr map[string]string) (*http.Response, []byte, error) {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", bytes.NewReader(body))
		if err != nil {
			return nil, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if err != nil {
			return nil, nil, err
		}
		if resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte(upstreamText)) {
			return nil, nil, fmt.Errorf("%w: status %d: %q", errBadAnswer, resp.StatusCode, clipped(answer))
		}
		return resp, answer, nil
	}

	resp, _, err := post([]byte(initializeBody), nil)
	if err != nil {
		return "", fmt.Errorf("opening a session: %w", err)
	}
	token := resp.Header.Get("Mcp-Session-Id")
	switch {
	case token == "":
		return "", fmt.Errorf("opening a session: the gateway's answer names none (the responder named %q)", responderSessionID)
	case !sealed && token != responderSessionID:
		return "", fmt.Errorf("opening a session: the gateway changed the responder's id %q to %q, with sessions off", responderSessionID, token)
	case sealed && token == responderSessionID:
		return "", fmt.Errorf("opening a session: the gateway passed the responder's own session id %q through instead of a sealed token", token)
	case strings.ContainsAny(token, "\r\n"):
		return "", fmt.Errorf("opening a session: a token that cannot be sent back: %q", token)
	}

	hdr := map[string]string{"Mcp-Session-Id": token, "MCP-Protocol-Version": sessionProtocolVersion}
	resp, _, err = post(body(1<<10), hdr)
	if err != nil {
		return "", fmt.Errorf("a call in the session (token of %d bytes): %w", len(token), err)
	}
	if got := resp.Header.Get("Mcp-Session-Id"); got != token {
		return "", fmt.Errorf("a call in the session: answered with Mcp-Session-Id %q, not the token sent (%d bytes)", got, len(token))
	}
	return token, nil
}

// poster posts one JSON-RPC body to the gateway at addr and returns its
// answer.
func poster(addr string) func(body string) (string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	return func(body string) (string, error) {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return string(b), err
	}
}

// checkPolicy checks that the gateway at addr enforces its tools policy: a
// call to a hidden tool is answered UNKNOWN_ACTION.
func checkPolicy(addr string) error {
	answer, err := poster(addr)(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"admin_reset","arguments":{}}}`)
	if err != nil {
		return fmt.Errorf("a call to a hidden tool: %w", err)
	}
	if !strings.Contains(answer, `code=\"UNKNOWN_ACTION\"`) {
		return fmt.Errorf("a call to a hidden tool was not refused by the tools policy: %q", answer)
	}
	return nil
}

// listTools sends one tools/list through the gateway at addr, and checks
// that validate learned from it: a call whose text is a number must then be
// answered by the gateway with a <validation_error>.
func listTools(addr string) error {
	post := poster(addr)
	if _, err := post(`{"jsonrpc":"2.0","id":0,"method":"tools/list"}`); err != nil {
		return fmt.Errorf("listing tools: %w", err)
	}
	answer, err := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":7}}}`)
	if err != nil {
		return fmt.Errorf("a call with a wrong argument: %w", err)
	}
	if !strings.Contains(answer, "<validation_error") {
		return fmt.Errorf("a call with a wrong argument was not refused by validate: %q", answer)
	}
	return nil
}

// sessionLines are the header lines that name the session of token in
// every request: Mcp-Session-Id and MCP-Protocol-Version.
func sessionLines(token string) string {
	return "Mcp-Session-Id: " + token + "\r\nMCP-Protocol-Version: " + sessionProtocolVersion + "\r\n"
}

func clipped(b []byte) []byte {
	return b[:min(len(b), checkBytes)]
}
