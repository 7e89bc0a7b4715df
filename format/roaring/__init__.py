"""Java RoaringBitmap's serialized forms (32- and 64-bit) as Paimon writes them."""
