//! Sans-IO scheduling core (work in progress).
