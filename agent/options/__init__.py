"""karmada-agent's command line: upstream flag names, defaults and validation, as an `Options` value.

Flags follow the Go agent (pflag syntax: `--flag=value` and `--flag value`, bools as `--flag` or
`--flag=false`, string lists comma-separated and repeatable, durations like "10s" or "16m40s").
A value upstream accepts is accepted here too, and means what it means upstream (a non-positive
`--cluster-api-qps`, `--rate-limiter-*` or `--concurrent-cluster-syncs` falls back to upstream's
default, `None` among other `--report-secrets` values is ignored). Refused are only the values
with which upstream would fail later or silently misbehave (validation's
`REFUSED_WHERE_UPSTREAM_MISBEHAVES` lists them; docs/differences-from-upstream.md says why for
each). Deliberate differences:

- certRotation is on by default (upstream: off). It only acts when the Karmada credential is a
  client certificate; `--controllers=*,-certRotation` turns it off.
- `--log-format`, `--leader-elect-lease-cluster`, `--karmada-kubeconfig-secret`,
  `--karmada-kubeconfig-secret-key` and the outage-safe deletion flags are ours; klog's
  file-logging flags are accepted and ignored (with a warning at start).

The modules, from the command line inward: `parser` (parse_options: flags to Options), `flags`
(the flag table), `pflag_argparse` (argparse taught pflag's syntax), `flag_values`, `durations`,
`feature_gates`, `controller_selection` and `bind_address` (the value types), `model` (Options),
`compatibility` (upstream's fallbacks, start warnings), `validation` and `formats` (what is
refused), `errors`.
"""

from agent.options.errors import HelpRequested, OptionsError
from agent.options.model import Options
from agent.options.parser import parse_options

__all__ = ["HelpRequested", "Options", "OptionsError", "parse_options"]
