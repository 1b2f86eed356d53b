//! PLACEHOLDER: the CoDel control law shared by codel, fq_codel (and later cake). Being written.
