//! nvJPEG, loaded at run time.
