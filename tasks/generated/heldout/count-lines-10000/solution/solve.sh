#!/bin/bash
wc -l < /app/ledger.dat > /app/output.txt
