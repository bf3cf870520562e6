#!/bin/bash
grep -cx pixel /app/scores.lst > /app/output.txt
