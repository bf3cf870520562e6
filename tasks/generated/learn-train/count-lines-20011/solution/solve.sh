#!/bin/bash
wc -l < /app/ledger.txt > /app/answer.txt
