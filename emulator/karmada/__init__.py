"""Karmada API data for the emulator's karmada profile (CRDs as Karmada ships them)."""
