package modelproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// PriceFile is the model price table as an operator writes it (YAML or JSON):
//
//	currency: USD
//	models:
//	- provider: anthropic         # optional: any provider when unset
//	  model: claude-sonnet-4-5*   # the model as requests name it; a trailing * matches a prefix
//	  input: "3.00"               # per million input tokens
//	  output: "15.00"             # per million output tokens
//
// The proxy prices each request by it as it settles: input tokens (cache writes and reads
// included, as the usage fields report them) at the input price, output tokens at the output
// price. The most specific entry wins: an exact model before a prefix, a longer prefix before
// a shorter one, an entry naming the provider before one that does not.
type PriceFile struct {
	Currency string       `json:"currency"`
	Models   []PriceEntry `json:"models"`
}

// PriceEntry is one model's prices, as decimal strings (or numbers) in Currency per million
// tokens.
type PriceEntry struct {
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model"`
	Input    Amount `json:"input"`
	Output   Amount `json:"output"`
}

// Amount is a decimal written as a string ("0.15") or a number (0.15).
type Amount string

// UnmarshalJSON takes a JSON string or number as it is written.
func (a *Amount) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*a = Amount(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("a price is a decimal number, not %s", b)
	}
	*a = Amount(n)
	return nil
}

// maxPrice bounds a price per million tokens (a typo's extra zeros are refused, not billed).
const maxPrice = 1_000_000

// Prices is a parsed price table.
type Prices struct {
	currency string
	entries  []price
}

type price struct {
	provider, model string
	prefix          bool
	in, out         int64 // micro-units per million tokens
}

// ParsePrices reads a price table (YAML or JSON).
func ParsePrices(data []byte) (*Prices, error) {
	var f PriceFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("model prices: %w", err)
	}
	if len(f.Currency) != 3 || strings.ToUpper(f.Currency) != f.Currency || strings.ContainsFunc(f.Currency, func(r rune) bool { return r < 'A' || r > 'Z' }) {
		return nil, fmt.Errorf("model prices: currency %q is not an ISO 4217 code (USD, EUR ...)", f.Currency)
	}
	p := &Prices{currency: f.Currency}
	seen := map[[2]string]bool{}
	for i, e := range f.Models {
		where := fmt.Sprintf("model prices: entry %d (%s)", i+1, e.Model)
		model, prefix := strings.CutSuffix(e.Model, "*")
		if model == "" && !prefix {
			return nil, fmt.Errorf("model prices: entry %d names no model", i+1)
		}
		if strings.Contains(model, "*") {
			return nil, fmt.Errorf("%s: * may only end a model name", where)
		}
		if seen[[2]string{e.Provider, e.Model}] {
			return nil, fmt.Errorf("%s: priced twice", where)
		}
		seen[[2]string{e.Provider, e.Model}] = true
		in, err := parsePrice(e.Input)
		if err != nil {
			return nil, fmt.Errorf("%s: input: %w", where, err)
		}
		out, err := parsePrice(e.Output)
		if err != nil {
			return nil, fmt.Errorf("%s: output: %w", where, err)
		}
		p.entries = append(p.entries, price{provider: e.Provider, model: model, prefix: prefix, in: in, out: out})
	}
	return p, nil
}

// LoadPrices reads the price table at path.
func LoadPrices(path string) (*Prices, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model prices: %w", err)
	}
	return ParsePrices(b)
}

// parsePrice is a price per million tokens in micro-units (exact to the micro-unit).
func parsePrice(n Amount) (int64, error) {
	s := strings.TrimSpace(string(n))
	if s == "" {
		return 0, errors.New("missing")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v < 0 || v > maxPrice {
		return 0, fmt.Errorf("%s is out of range (0 to %d per million tokens)", s, maxPrice)
	}
	return int64(math.Round(v * 1e6)), nil
}

// Currency is the table's currency.
func (p *Prices) Currency() string {
	if p == nil {
		return ""
	}
	return p.currency
}

// Cost is what in input and out output tokens of model (at provider) cost, in micro-units of
// the table's currency rounded to the nearest, and whether the table prices the model.
func (p *Prices) Cost(provider, model string, in, out int64) (int64, bool) {
	e := p.find(provider, model)
	if e == nil {
		return 0, false
	}
	// Tokens and prices are bounded (a request's tokens by what the provider reports, a price
	// by maxPrice): in floating point the product of the largest stays exact to a micro-unit
	// well past any real request.
	micros := (float64(in)*float64(e.in) + float64(out)*float64(e.out)) / 1e6
	return int64(math.Round(micros)), true
}

// find is the most specific entry that prices model at provider (nil: none).
func (p *Prices) find(provider, model string) *price {
	if p == nil {
		return nil
	}
	var best *price
	score := func(e *price) int {
		s := len(e.model) * 4
		if !e.prefix {
			s += 1 << 20
		}
		if e.provider != "" {
			s += 2
		}
		return s
	}
	for i := range p.entries {
		e := &p.entries[i]
		if e.provider != "" && e.provider != provider {
			continue
		}
		if e.prefix && !strings.HasPrefix(model, e.model) || !e.prefix && model != e.model {
			continue
		}
		if best == nil || score(e) > score(best) {
			best = e
		}
	}
	return best
}

// FormatMoney is an amount in millionths of a currency as a decimal: two places when it is
// whole cents ("5.00"), up to six below that ("0.00017").
func FormatMoney(micros int64) string {
	sign := ""
	if micros < 0 {
		sign, micros = "-", -micros
	}
	whole, frac := micros/1_000_000, micros%1_000_000
	if frac%10_000 == 0 {
		return fmt.Sprintf("%s%d.%02d", sign, whole, frac/10_000)
	}
	return sign + strings.TrimRight(fmt.Sprintf("%d.%06d", whole, frac), "0")
}
