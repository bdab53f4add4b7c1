// Package clients is deputy's conformance matrix of real clients: the
// official Anthropic and OpenAI SDKs, the Vercel AI SDK, Claude Code and
// OpenAI's Codex CLI, each run as its own program (Node scripts in checks/,
// the CLIs as they ship) against `deputy fakellm` over loopback HTTP, with a
// scenario written for the check. A check passes when the client completed
// a tool round trip and printed what the scenario answered, and the fake's
// request log (GET /_deputy/requests) holds what the client sent. The
// packages are pinned in package.json and installed by `npm ci --prefix
// clients`; without them the test skips, unless DEPUTY_REQUIRE_CLIENTS=1
// (CI), where it fails. docs/clients.md has the table.
package clients
