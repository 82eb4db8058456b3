//! The protected resource (the shop database): every write carries a fencing token. Stub: see issue 2.
