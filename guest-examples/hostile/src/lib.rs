//! Shared by the hostile guests: nothing; each binary is one misbehaviour.
