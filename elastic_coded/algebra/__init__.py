"""Fields and codes (pure: numpy and galois only)."""

from .fields import (
                     MAX_PRIME,
                     BinaryExtField,
                     Field,
                     PrimeField,
                     RealField,
                     field,
                     is_prime,
                     relative_error,
)

__all__ = ["Field", "RealField", "PrimeField", "BinaryExtField", "field", "is_prime",
           "relative_error", "MAX_PRIME"]
