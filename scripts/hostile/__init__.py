"""The parts of scripts/hostile_catalogue.py."""
