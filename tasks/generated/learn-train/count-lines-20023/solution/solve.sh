#!/bin/bash
grep -cx orbit /app/ledger.dat > /app/count.txt
