#!/bin/bash
wc -l < /app/scores.lst > /app/value.txt
