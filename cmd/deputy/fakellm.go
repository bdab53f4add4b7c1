package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/serve"
)

func newFakeLLMCmd() *cobra.Command {
	var addr, scenario, apiKey string
	cmd := &cobra.Command{
		Use:   "fakellm [--addr 127.0.0.1:PORT] [--scenario FILE]",
		Short: "Serve deputy's fake Anthropic and OpenAI-compatible model API",
		Long: `Serve a wire-faithful fake of the Anthropic Messages API (/v1/messages) and
the OpenAI Chat Completions API (/v1/chat/completions), driven by a scenario file.
Point real clients at it with ANTHROPIC_BASE_URL or OPENAI_BASE_URL. Without a
scenario it answers every request with a short text.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := fake.Options{APIKey: apiKey}
			if scenario != "" {
				s, err := loadScenario(scenario)
				if err != nil {
					return usageErr("%v", err)
				}
				opts.Responder = s
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return usageErr("listen: %v", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serveFake(ctx, ln, fake.NewServer(opts), cmd)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:7421", "address to listen on (loopback by default)")
	f.StringVar(&scenario, "scenario", "", "scenario file (YAML) deciding the answers, or \"demo\" for the built-in demo")
	f.StringVar(&apiKey, "api-key", "", "require this API key (x-api-key or Authorization: Bearer); default: accept any")
	return cmd
}

func serveFake(ctx context.Context, ln net.Listener, h http.Handler, cmd *cobra.Command) error {
	// deputy serve's limits (timeouts on headers and bodies, none on the
	// streamed answers; the header and connection caps), every request
	// counting as authenticated: the fake's API key is its own business.
	srv := &http.Server{Handler: h}
	hln := serve.Harden(srv, ln, serve.Limits{})
	fmt.Fprintf(cmd.OutOrStdout(), "deputy fakellm listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(hln) }()
	select {
	case err := <-errc:
		return &exitError{code: exitFailed, err: err}
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return &exitError{code: exitFailed, err: err}
	}
	return nil
}
