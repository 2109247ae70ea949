//! subcontract
