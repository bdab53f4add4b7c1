package cost

import "strings"

// splitName parts a model name as deputy writes it, provider:model, into
// its provider ("" for a bare name) and the model's own name. Only the
// first colon separates: "ollama:qwen3:8b" is qwen3:8b on ollama.
func splitName(name string) (provider, model string) {
	if p, m, ok := strings.Cut(name, ":"); ok {
		if p == "openai-responses" {
			p = "openai" // OpenAI's other wire: the same models at the same prices
		}
		return p, m
	}
	return "", name
}

// family is a model's name without the suffixes that pin a snapshot or
// float an alias, so a dated id finds the row of the model it is a
// snapshot of: Anthropic's "-20250929" (and Vertex AI's "@20250929"),
// OpenAI's "-2025-08-07", and "-latest". Both providers price a snapshot
// as its model (their pricing pages list models, not snapshots).
func family(model string) string {
	for {
		switch {
		case strings.HasSuffix(model, "-latest"):
			model = model[:len(model)-len("-latest")]
		case hasDateSuffix(model, '-', "dddddddd"), hasDateSuffix(model, '@', "dddddddd"):
			model = model[:len(model)-9]
		case hasDateSuffix(model, '-', "dddd-dd-dd"):
			model = model[:len(model)-11]
		default:
			return model
		}
	}
}

// hasDateSuffix reports whether s ends in sep followed by digits laid out
// as pattern ('d' a digit, anything else itself), with something before.
func hasDateSuffix(s string, sep byte, pattern string) bool {
	n := len(pattern) + 1
	if len(s) <= n || s[len(s)-n] != sep {
		return false
	}
	tail := s[len(s)-len(pattern):]
	for i := 0; i < len(pattern); i++ {
		c := tail[i]
		if pattern[i] == 'd' && (c < '0' || c > '9') || pattern[i] != 'd' && c != pattern[i] {
			return false
		}
	}
	return true
}

// matchScore says how well the table key k names the model a query names
// (qp, qm: its provider and own name; qf: its family): 0 when it does not,
// otherwise higher for a closer match. The model's own name weighs more
// than the provider: the exact name beats its family, whatever the
// providers. Among equal names, the same provider beats a bare key, which
// beats a key with a provider when the query has none; a key with a
// different provider never matches (the same model through another
// provider may cost something else).
func matchScore(qp, qm, qf, k string) int {
	kp, km := splitName(k)
	name := 0
	switch {
	case km == qm:
		name = 2
	case family(km) == qf:
		name = 1
	default:
		return 0
	}
	prov := 0
	switch {
	case kp == qp:
		prov = 3
	case kp == "":
		prov = 2
	case qp == "":
		prov = 1
	default:
		return 0
	}
	return name*4 + prov
}

// shadows reports whether an override keyed o replaces the entry keyed b:
// the same model family, and the same provider or none named by o.
func shadows(o, b string) bool {
	op, om := splitName(o)
	bp, bm := splitName(b)
	return family(om) == family(bm) && (op == "" || op == bp)
}
