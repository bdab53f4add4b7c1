package deputy

import (
	"fmt"
	"log/slog"
	"net/url"
)

// Options, ProviderOptions and Endpoint hold API keys (and Options.DB a
// Postgres URL's password): printed with %v, %+v, %#v or logged through
// slog they show them masked, since options are what a program prints
// when it debugs its setup.

const masked = "[redacted]"

func mask(key string) string {
	if key == "" {
		return ""
	}
	return masked
}

// The plain* types have the fields and none of the methods, so formatting
// them does not call back into String; their fields' own methods (an
// Endpoint in a map, Options.Provider) still mask.
type (
	plainEndpoint Endpoint
	plainProvider ProviderOptions
	plainOptions  Options
)

func (e Endpoint) masked() plainEndpoint {
	e.APIKey = mask(e.APIKey)
	return plainEndpoint(e)
}

// String is e with its key masked.
func (e Endpoint) String() string { return fmt.Sprintf("%+v", e.masked()) }

// GoString is e with its key masked.
func (e Endpoint) GoString() string { return fmt.Sprintf("%#v", e.masked()) }

// LogValue is e with its key masked.
func (e Endpoint) LogValue() slog.Value { return slog.StringValue(e.String()) }

func (p ProviderOptions) masked() plainProvider {
	p.APIKey = mask(p.APIKey)
	return plainProvider(p)
}

// String is p with its keys masked.
func (p ProviderOptions) String() string { return fmt.Sprintf("%+v", p.masked()) }

// GoString is p with its keys masked.
func (p ProviderOptions) GoString() string { return fmt.Sprintf("%#v", p.masked()) }

// LogValue is p with its keys masked.
func (p ProviderOptions) LogValue() slog.Value { return slog.StringValue(p.String()) }

func (o Options) masked() plainOptions {
	if u, err := url.Parse(o.DB); err == nil && u.User != nil {
		o.DB = u.Redacted()
	}
	return plainOptions(o)
}

// String is o with its keys (Provider) and the database URL's password
// masked.
func (o Options) String() string { return fmt.Sprintf("%+v", o.masked()) }

// GoString is o with its keys and the database URL's password masked.
func (o Options) GoString() string { return fmt.Sprintf("%#v", o.masked()) }

// LogValue is o with its keys and the database URL's password masked.
func (o Options) LogValue() slog.Value { return slog.StringValue(o.String()) }
