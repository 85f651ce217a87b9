"""karmada-bootstrap: registers member clusters with Karmada in pull mode, as karmadactl does."""

PROGRAM = "karmada-bootstrap"
