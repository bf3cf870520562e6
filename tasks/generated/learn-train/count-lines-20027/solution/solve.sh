#!/bin/bash
wc -l < /app/scores.log > /app/result.txt
